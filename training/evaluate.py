"""`python training/evaluate.py ...` runs the `nav-evaluate` command (navtrain.evaluate); see its --help."""

from navtrain.evaluate import main

if __name__ == "__main__":
    raise SystemExit(main())
