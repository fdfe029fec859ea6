package flow

import (
	"errors"

	"github.com/drover-dev/drover/internal/drovertype"
)

// idProblem says what is wrong with s as an id (drovertype.ValidID), or
// returns "".
func idProblem(s string) string {
	var e *drovertype.IDError
	if errors.As(drovertype.ValidID(s), &e) {
		return e.Problem
	}
	return ""
}
