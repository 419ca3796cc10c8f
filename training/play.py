"""`python training/play.py ...` runs the `nav-play` command (navtrain.play); see its --help."""

from navtrain.play import main

if __name__ == "__main__":
    raise SystemExit(main())
