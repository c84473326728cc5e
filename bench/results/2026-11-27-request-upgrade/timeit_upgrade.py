"""Per-request cost of kbus.protocol.upgrade beside kio's native decode of the same request, and of the registered
wrapper for a request already of the declared class (timeit, best of 7). Run: .venv/bin/python <this file>"""
import timeit, sys, io
from kio.serial import entity_reader, entity_writer
from kbus.protocol.codec import request_type, build
from kbus.protocol.upgrade import upgrader
def t(f, n=20000):
    return min(timeit.repeat(f, number=n, repeat=7)) / n * 1e6
def case(key, v, tv, label, **f):
    src, dst = request_type(key, v), request_type(key, tv)
    req = build(src, **f)
    buf = io.BytesIO(); entity_writer(src)(buf, req); data = buf.getvalue()
    rd = entity_reader(src)
    up = upgrader(src, dst)
    print(f"{label}: upgrade {t(lambda: up(req)):.2f} us, kio decode {t(lambda: rd(data, 0)):.2f} us")
mod = lambda k, v: sys.modules[request_type(k, v).__module__]
case(11, 0, 9, "JoinGroup v0->v9, 1 protocol", group_id="g", member_id="m", protocol_type="consumer", protocols=(mod(11,0).JoinGroupRequestProtocol(name="range", metadata=b"x"*40),))
case(11, 5, 9, "JoinGroup v5->v9, 1 protocol", group_id="g", member_id="m", protocol_type="consumer", protocols=(mod(11,5).JoinGroupRequestProtocol(name="range", metadata=b"x"*40),))
for v, tv, n in ((0, 12, 1), (4, 12, 1), (9, 10, 1), (9, 10, 10), (11, 12, 10)):
    T = mod(3, v).MetadataRequestTopic
    case(3, v, tv, f"Metadata v{v}->v{tv}, {n} topics", topics=tuple(build(T, name=f"t{i}") for i in range(n)))
from kbus.server.apis.registry import _upgrading, _upgrades
async def h(m, ctx, req): return None
served = _upgrading(h, _upgrades(3, 0, 12, (request_type(3, 10), request_type(3, 12))))
v12 = build(request_type(3, 12))
def run(f, r):
    c = f(None, None, r); c.close()
print(f"dispatch of a v12 Metadata: direct {t(lambda: run(h, v12)):.3f} us, through the registered wrapper {t(lambda: run(served, v12)):.3f} us")
