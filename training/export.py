"""`python training/export.py ...` runs the `nav-export` command (navtrain.export_cli); see its --help."""

from navtrain.export_cli import main

if __name__ == "__main__":
    raise SystemExit(main())
