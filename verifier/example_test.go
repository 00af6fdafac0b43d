package verifier_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
)

func ExampleMemory_Do() {
	ctx := context.Background()
	m := verifier.NewMemory()
	config := map[string]string{}

	set := func(tok fence.Token, value string) error {
		return m.Do(ctx, "config", tok, func() error {
			config["mode"] = value
			return nil
		})
	}
	fmt.Println(set(fence.Token{Key: "config", Seq: 1, Holder: "a"}, "fast"))
	fmt.Println(set(fence.Token{Key: "config", Seq: 2, Holder: "b"}, "safe"))
	err := set(fence.Token{Key: "config", Seq: 1, Holder: "a"}, "fast") // a paused and came back
	fmt.Println(errors.Is(err, verifier.ErrStale), config["mode"])
	// Output:
	// <nil>
	// <nil>
	// true safe
}

func ExampleNewMiddleware() {
	var stored string
	fenced, err := verifier.NewMiddleware(verifier.NewMemory())
	if err != nil {
		panic(err)
	}
	h := fenced(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := fence.FromContext(r.Context())
		stored = fmt.Sprintf("written with token %d", tok.Seq)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()

	put := func(tok fence.Token) {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/doc", strings.NewReader("..."))
		fence.SetHeader(req.Header, tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.Status, resp.Header.Values(verifier.HighestHeader))
	}
	put(fence.Token{Key: "doc", Seq: 5, Holder: "a"})
	put(fence.Token{Key: "doc", Seq: 4, Holder: "b"})
	fmt.Println(stored)
	// Output:
	// 200 OK []
	// 409 Conflict [5]
	// written with token 5
}
