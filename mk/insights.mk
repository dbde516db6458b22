# insights (events timeline, change stream). tests/integration/test_insights.c drives the change
# stream with Node's `eventsource` package (package.json, installed into node_modules by npm ci).
#
# make bench-insights: tests/bench/insights_bench.sh (not in `make test`): the change stream's
# fan-out to CLIENTS (1,000) SSE clients at 1,000 and 60,000 changes a minute against one client,
# and Redis memory per timeline event with the retention bound under compressed churn.
.PHONY: bench-insights
bench-insights: all
	FG_BUILD=$(BUILD) tests/bench/insights_bench.sh $(or $(CLIENTS),1000) $(or $(SECONDS),10)
