"""python -m fp8conv: the bundled binary, as the fp8conv command runs it."""
from ._cli import main

main()
