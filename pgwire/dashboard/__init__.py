"""The web dashboard: what the server's streaming jobs do, in a browser.

`swell playground` serves it on `--dashboard-listen-addr` (default 127.0.0.1:5691;
an empty value or `off` disables it). Read-only: relations with row counts, rows/s, lag
and last error; each materialized view's and sink's dataflow drawn from its stored stream
plan with rows/s, CPU share and state size per operator; barrier latency over time.

* `server` - aiohttp routes, access control, the JSON API;
* `rates` - rows/s and CPU share from the engine's cumulative counters;
* `layout` - layered DAG layout of a job's operators (no graphviz);
* `svg` - the pictures;
* `static/` - the page, its vanilla script and style.

Layering: this package calls the engine (`engine.stream.overview`); the engine never
imports it.
"""

DEFAULT_ADDR = "127.0.0.1:5691"
