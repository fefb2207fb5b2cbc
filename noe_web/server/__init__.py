"""The gunicorn process that serves the webhook over TLS; it knows nothing of admissions.

* :mod:`.application` — gunicorn run programmatically, the master's metrics server
* :mod:`.worker` — the gthread worker reading TLS handshakes and requests in its event loop
* :mod:`.exchange` — one exchange: the WSGI environ from the parsed head, the response in one send
* :mod:`.framing` — an HTTP/1.1 request head parsed strictly, and where the request ends in a buffer
* :mod:`.tls` — the self-signed default and the reloading server context
"""
