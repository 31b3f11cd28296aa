"""The recursive loop: collect experience with the champion, build a successor pair, evaluate
it under the contract in a separate process, promote or reject, record lineage, plot."""
