package once_test

func hostChild() (int, bool) { return 0, false }
