"""`kbus ui`: a web console for the cluster, server-rendered from a small ASGI app (starlette + jinja2, the `ui`
extra). It talks to the cluster through kbus's own admin client with the same client configs as the other
commands; see docs/ui.md."""
