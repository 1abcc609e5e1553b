"""noetlc.service: the HTTP API, playbook catalog, credential store and web console that
`noetl-vm serve` runs (FastAPI on uvicorn). Nothing here is imported by `noetlc --version` or
the other commands: the command imports `noetlc.service.app` when it runs."""
