"""`python training/benchmark_sim.py ...` runs the `nav-benchmark-sim` command (navsim.benchmark); see its --help."""

from navsim.benchmark import main

if __name__ == "__main__":
    raise SystemExit(main())
