from devplace.cli._app import main

main()
