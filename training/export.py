"""`python training/export.py ...` runs the `nav-export` command (navtrain.export); see its --help."""

from navtrain.export import main

if __name__ == "__main__":
    raise SystemExit(main())
