"""The gunicorn process that serves the webhook over TLS; it knows nothing of admissions.

* :mod:`.application` — gunicorn run programmatically, the master's metrics server;
* :mod:`.worker` — the gthread worker reading TLS handshakes and requests in its event loop;
* :mod:`.framing` — where one HTTP/1.1 request ends in a buffer;
* :mod:`.tls` — the self-signed default and the reloading server context.
"""
