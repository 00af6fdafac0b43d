package lockset_test

func callerChild() (int, bool) { return 0, false }
