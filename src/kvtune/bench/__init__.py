"""Load generation: the workload spec, prompt sources and the async streaming client.

The only module tree that sends HTTP load traffic at a server.
"""
