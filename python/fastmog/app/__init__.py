"""fastmog.app: the application wing, the command line `python -m fastmog`
(cli) and the several-source runner on Dask (_dask, fastmog.process_sources),
both built on the library and never imported by it.

A source is found and opened by _sources (keyword options, SourceOptions),
its frames run through the one frame loop in _loop, its masks go to
_writers; _options, _checks, _progress, _errors and _cvio serve the command
line, _signals how it stops (Ctrl-C, SIGTERM, SIGHUP), _multi its
several-source form.
"""
