"""``python -m gpuprov``: the same command line as the installed ``gpuprov`` script."""

from gpuprov import main

main()
