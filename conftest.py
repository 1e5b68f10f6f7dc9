pytest_plugins = ["kxen_testing.pytest_plugin"]
