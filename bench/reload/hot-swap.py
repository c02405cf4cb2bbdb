#!/usr/bin/env python3
"""The first request after a hot swap, against the steady p50 (docs/deploy.md#figures).

Run from a directory holding a.wasm and b.wasm (two workers that answer POST /w), with
edgegate serving hot-swap.toml from that directory:

    cp a.wasm w.wasm
    edgegate serve --config hot-swap.toml &
    python3 hot-swap.py

Each of 20 rounds renames the other module over w.wasm, POSTs /reload, times the first
request (on a keep-alive connection), then the p50 of 1000 more.
"""
import http.client, time, shutil, os, statistics, json
body=b'{ "a" : 1 }'
c=http.client.HTTPConnection("127.0.0.1",18081)
adm=lambda: http.client.HTTPConnection("127.0.0.1",19091)
def req():
    t=time.perf_counter(); c.request("POST","/w",body); r=c.getresponse(); d=r.read(); return (time.perf_counter()-t)*1e6, d
def steady(n=2000):
    for _ in range(200): req()
    return statistics.median(req()[0] for _ in range(n))
def reload():
    a=adm(); a.request("POST","/reload"); r=a.getresponse(); return json.loads(r.read())
rows=[]
for i in range(20):
    src='b.wasm' if i%2==0 else 'a.wasm'
    shutil.copy(src,'w.tmp'); os.rename('w.tmp','w.wasm')
    rep=reload()
    first,d=req()
    p50=steady(1000)
    rows.append((first,p50,rep['took']))
firsts=[r[0] for r in rows]; p50s=[r[1] for r in rows]; over=[r[0]-r[1] for r in rows]
for r in rows: print("%.0f %.0f %.2f"%r)
print("first-after-swap us: median %.0f max %.0f"%(statistics.median(firsts),max(firsts)))
print("steady p50 us: median %.0f"%statistics.median(p50s))
print("first minus p50 us: median %.0f max %.0f"%(statistics.median(over),max(over)))
print("reload took ms (changed module, compile included): median %.2f max %.2f"%(statistics.median([r[2] for r in rows[2:]]),max(r[2] for r in rows)))
