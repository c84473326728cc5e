import asyncio, sys, runpy
import uvloop
mode = sys.argv.pop(1)
if mode == "uvloop":
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
sys.argv[0] = "bench/scenarios/connection_path.py"
runpy.run_path("bench/scenarios/connection_path.py", run_name="__main__")
