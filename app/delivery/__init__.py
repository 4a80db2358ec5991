"""Turn events to their clients, on whichever replica: in-process fan-out to watchers (hub), across replicas over
PostgreSQL NOTIFY (relay; its Broadcast is the runner's EventOutlet), starting and following turns for POST, SSE and
the WebSocket (stream), and closing the turns a stopped replica left running, so their watchers see them end
(recovery)."""
