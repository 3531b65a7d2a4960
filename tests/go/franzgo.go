// Package franzgo pins franz-go, whose own pkg/kgo integration suite tests/test_franz_go.py runs
// against our broker (go test compiles a dependency's tests from the module cache).
package franzgo

import _ "github.com/twmb/franz-go/pkg/kgo"
