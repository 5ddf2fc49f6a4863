"""What serving assumes where its caller says nothing: the scheduler's limits, the requests a
run simulates and the seed their lengths are drawn with. Apart from the simulator, which
loads numpy, so that the command line shows them in its help without loading it."""

TOKEN_BUDGET = 2048    # tokens one step may hold
MAX_SEQUENCES = 256    # sequences one step may hold
REQUESTS = 1000        # requests a served run simulates
SEED = 0               # of arrivals and lengths drawn
MOST_REQUESTS = 1_000_000   # the most requests a run may simulate
