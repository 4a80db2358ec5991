"""What the tests and the benchmarks both drive Engram with: a scripted OpenAI-compatible LLM on loopback and
`engram serve` as a real process. Importable from the repository root, as tests/ and bench/ are; never installed."""
