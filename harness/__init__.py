"""The one harness for tests and benchmarks: a real ``streamlit run`` server, browser-less sessions, their checks.

* server: start and stop the app on 127.0.0.1 and a free port; its health, metrics and log.
* rss: the server's resident memory, children included (psutil), and a sampler for its peak.
* session: a browser tab reduced to its websocket, speaking Streamlit's own protocol.
* checks: what a session must see for its own link (URL, shapes, numbers equal to mha_core's).
* drive: a student's session over time (open the link, move widgets, check every run).
* chromium: the flags and waits shared by the browser tests and the browser benchmarks.

The app never imports this package; tests/, bench/ and deploy/ do.
"""
