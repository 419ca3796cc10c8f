"""`python training/evaluate.py ...` runs the `nav-evaluate` command (navtrain.evaluate_cli); see its --help."""

from navtrain.evaluate_cli import main

if __name__ == "__main__":
    raise SystemExit(main())
