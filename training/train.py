"""`python training/train.py ...` runs the `nav-train` command (navtrain.train_cli); see its --help."""

from navtrain.train_cli import main

if __name__ == "__main__":
    raise SystemExit(main())
