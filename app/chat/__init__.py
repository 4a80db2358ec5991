"""The turn loop: one turn of an agent, from the user's message to its reply (runner), with its tools, the context
the LLM sees (context, prompt, tokens), one turn at a time per agent (locks), and the turn's stored record (events,
models, repository, service). Where the events go once stored is app/delivery's business (runner.EventOutlet)."""
