#!/usr/bin/env python3
"""A rolling upgrade under load (docs/deploy.md#binary-upgrades): four clients POST /w on fresh
connections while a second edgegate starts on the port (reuse_port) and the first drains on
SIGTERM. Prints the requests answered and those that failed.

Run from a directory holding a.wasm (any worker that answers POST /w with 200) and
upgrade.toml, with $EDGEGATE naming the binary (default: edgegate on the PATH):

    python3 upgrade.py
"""
import socket, threading, time, subprocess, sys, os, signal
B=os.environ.get('EDGEGATE', 'edgegate')
def start(): return subprocess.Popen([B,'serve','--config','upgrade.toml'],stdout=subprocess.PIPE,stderr=subprocess.DEVNULL)
a=start(); a.stdout.readline(); a.stdout.readline()
stop=False; ok=[0]; bad=[]
def load():
    while not stop:
        try:
            s=socket.create_connection(("127.0.0.1",18085),timeout=5)
            s.sendall(b'POST /w HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}')
            d=b''
            while True:
                c=s.recv(4096)
                if not c: break
                d+=c
            s.close()
            if d.startswith(b'HTTP/1.1 200'): ok[0]+=1
            else: bad.append(d[:40])
        except Exception as e: bad.append(repr(e))
ts=[threading.Thread(target=load) for _ in range(4)]
[t.start() for t in ts]
time.sleep(1)
b=start(); b.stdout.readline(); b.stdout.readline()
time.sleep(1)
a.send_signal(signal.SIGTERM); a.wait()
time.sleep(1)
stop=True; [t.join() for t in ts]
b.send_signal(signal.SIGTERM); b.wait()
print("ok",ok[0],"bad",len(bad),bad[:5])
