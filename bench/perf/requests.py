"""Writes the wrk scripts bench/perf/profile loads with: the lab's requests, made the way
crates/bench/src/workload.rs makes them (the 1 KiB JSON body, the HS256 token)."""
import base64, hashlib, hmac, json, sys, time

out = sys.argv[1]
SECRET = b"edgegate-bench-hs256-secret-0123456789"


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def compact(value):
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


items = [{"id": i, "name": f"item-{i:02}", "price": 1000 + i * 37, "qty": i % 3 + 1,
          "sku": f"SKU-{i * 7919:06}"} for i in range(1, 9)]
doc = {"currency": "EUR", "items": items, "order": 48213, "pad": "",
       "user": {"email": "ada@example.com", "id": 7, "name": "Ada"}}
doc["pad"] = "x" * (1024 - len(compact(doc)))
body = compact(doc)

now = int(time.time())
short = len('{"upstream":"service-a","set":{"x-jwt-sub":"","x-jwt-scope":"read write"}}')
claims = {"aud": "service-a", "exp": now + 86400, "iat": now, "iss": "edgegate-bench",
          "scope": "read write", "sub": "bench-" + "u" * (128 - short - 6)}
signing_input = b64(b'{"alg":"HS256","typ":"JWT","kid":"bench"}') + "." + b64(compact(claims).encode())
signature = b64(hmac.new(SECRET, signing_input.encode(), hashlib.sha256).digest())

scripts = {
    "ping": "",
    "db-lookup": "",
    "static-json": 'wrk.method = "POST"\nwrk.body = [[' + body + ']]\n'
                   'wrk.headers["Content-Type"] = "application/json"\n',
    "auth-check": f'wrk.headers["Authorization"] = "Bearer {signing_input}.{signature}"\n',
}
for name, text in scripts.items():
    with open(f"{out}/{name}.lua", "w") as f:
        f.write(text)
