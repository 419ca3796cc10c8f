"""`python training/train.py ...` runs the `nav-train` command (navtrain.train); see its --help."""

from navtrain.train import main

if __name__ == "__main__":
    raise SystemExit(main())
