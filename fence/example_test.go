package fence_test

import (
	"fmt"
	"net/http"

	"github.com/fencelock/fencelock/fence"
)

func ExampleParse() {
	tok, err := fence.Parse("42:0b6c9a8e-6f5e-4c1a-9a43-61c0b2f5d3a1:orders/17")
	if err != nil {
		panic(err)
	}
	fmt.Println(tok.Key, tok.Seq)

	_, err = fence.Parse("042:h:orders/17")
	fmt.Println(err)
	// Output:
	// orders/17 42
	// fence: malformed token: seq "042" has a leading zero
}

func ExampleToken_Supersedes() {
	stored := fence.Token{Key: "orders", Seq: 7, Holder: "a"}
	fmt.Println(fence.Token{Key: "orders", Seq: 8, Holder: "b"}.Supersedes(stored)) // newer
	fmt.Println(fence.Token{Key: "orders", Seq: 7, Holder: "a"}.Supersedes(stored)) // same holder again
	fmt.Println(fence.Token{Key: "orders", Seq: 7, Holder: "b"}.Supersedes(stored)) // conflict
	fmt.Println(fence.Token{Key: "orders", Seq: 6, Holder: "a"}.Supersedes(stored)) // stale
	// Output:
	// true
	// true
	// false
	// false
}

func ExampleSetHeader() {
	req, _ := http.NewRequest(http.MethodPut, "http://storage.example/orders/17", nil)
	fence.SetHeader(req.Header, fence.Token{Key: "orders/17", Seq: 9, Holder: "worker-1"})
	fmt.Println(req.Header.Get(fence.Header))
	// Output: 9:worker-1:orders/17
}
