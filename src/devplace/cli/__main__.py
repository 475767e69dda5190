from devplace.cli.app import main

main()
