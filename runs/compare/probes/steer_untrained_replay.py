import runpy, sys
sys.argv = ["run.py", "30"]
import importlib.util
spec = importlib.util.spec_from_file_location("probe", "/tmp/steer/run.py")
src = open("/tmp/steer/run.py").read().split("bundle = ")[0]
exec(compile(src, "probe", "exec"))
from navtrain.compare import main
main(["--bundle", "runs/recipes/holonomic_direct/bundle_2150", "--episodes", "100", "--rows", "clutter", "--seed", "1000003",
      "--driver", "policy", "--replay", sys.argv_ep if False else "18", "--num-envs", "100", "--out", "/tmp/steer/replay18"])
print(STATS)
