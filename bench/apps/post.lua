-- wrk: POST a 64 KiB body on every request.
wrk.method = "POST"
wrk.body = string.rep("x", 65536)
wrk.headers["Content-Type"] = "application/octet-stream"
