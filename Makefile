# Convenience targets; the scripts are what the README and CI use.
.PHONY: demo test bench fuzz
demo:
	scripts/demo.sh
test:
	scripts/test.sh
bench:
	go test -run XXX -bench . -benchmem ./...
fuzz:
	go test -run XXX -fuzz FuzzParse -fuzztime 30s ./fence
	go test -run XXX -fuzz FuzzRoundTrip -fuzztime 30s ./fence
