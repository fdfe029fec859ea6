package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-dev/drover/internal/controller"
	"github.com/drover-dev/drover/internal/termsafe"
)

// What a command's argument may name, for shell completion.
type targetKinds uint8

const (
	completeFlows    targetKinds = 1 << iota
	completeTasks                // FLOW/TASK
	completeAttempts             // FLOW_TASK_N
)

// completeTarget completes flow ids, FLOW/TASK and attempt ids from the live
// controller. Completion must never hang a shell or print an error into it:
// it gives up after two seconds and then offers nothing.
func completeTarget(kinds targetKinds) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		const none = cobra.ShellCompDirectiveNoFileComp
		if len(args) > 0 {
			return nil, none
		}
		nc, err := connect(cmd)
		if err != nil {
			return nil, none
		}
		defer nc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		cl := &controller.Client{NC: nc}
		flowID, rest, hasTask := strings.Cut(toComplete, "/")
		if !hasTask && kinds&completeAttempts != 0 {
			flowID, rest, _ = strings.Cut(toComplete, "_")
		}
		// A whole flow id and a separator: complete inside that flow.
		if flowID != toComplete {
			st, err := cl.Status(ctx, flowID)
			if err != nil || st.Detail == nil {
				return nil, none
			}
			var out []cobra.Completion
			if hasTask && kinds&completeTasks != 0 {
				for _, t := range st.Detail.Tasks {
					if strings.HasPrefix(t.ID, rest) && clean(t.ID) {
						out = append(out, cobra.CompletionWithDesc(flowID+"/"+t.ID, termsafe.Line(string(t.State))))
					}
				}
			}
			if !hasTask && kinds&completeAttempts != 0 {
				for _, a := range st.Detail.Attempts {
					if strings.HasPrefix(a.ID, toComplete) && clean(a.ID) {
						out = append(out, cobra.CompletionWithDesc(a.ID, termsafe.Line(string(a.State))))
					}
				}
			}
			return out, none
		}
		st, err := cl.Status(ctx, "")
		if err != nil {
			return nil, none
		}
		var out []cobra.Completion
		for _, f := range st.Flows {
			if strings.HasPrefix(f.ID, toComplete) && clean(f.ID) {
				out = append(out, cobra.CompletionWithDesc(f.ID, termsafe.Line(string(f.State)+" "+f.Name)))
			}
		}
		// Only flows: the id is the whole argument. Otherwise the user may
		// go on with "/" or "_".
		if kinds != completeFlows {
			return out, none | cobra.ShellCompDirectiveNoSpace
		}
		return out, none
	}
}

// clean reports whether an id can be offered to a shell as it is: one that
// would need escaping is not an id anyone can type.
func clean(id string) bool {
	return id != "" && termsafe.Line(id) == id && !strings.ContainsAny(id, " '\"\\$`")
}

// withCompletion sets cmd's argument completion.
func withCompletion(kinds targetKinds, cmd *cobra.Command) *cobra.Command {
	cmd.ValidArgsFunction = completeTarget(kinds)
	return cmd
}
