package cli

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"

	"github.com/spf13/cobra"
)

func (a *app) kubeconfigCmd() *cobra.Command {
	var instanceID, file string
	cmd := &cobra.Command{
		Use:     "kubeconfig",
		Short:   "Get a runtime's kubeconfig (GET /kubeconfig/{instance_id})",
		Example: "  kcp kubeconfig -i 1234 -f rt.yaml\n  kcp kubeconfig -i 1234 > rt.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if instanceID == "" {
				return usagef("--instance-id is required")
			}
			raw, err := a.client.do(cmd.Context(), "GET", "/kubeconfig/"+url.PathEscape(instanceID), nil, nil)
			if err != nil {
				return err
			}
			if file == "" {
				_, err = a.io.Out.Write(raw)
				return err
			}
			// A kubeconfig is a credential: only its owner may read it.
			if err := os.WriteFile(file, raw, 0o600); err != nil {
				return fmt.Errorf("writing the kubeconfig: %w", err)
			}
			fmt.Fprintf(a.io.Out, "kubeconfig of instance %s written to %s\n", instanceID, file)
			return nil
		},
	}
	cmd.Flags().StringVarP(&instanceID, "instance-id", "i", "", "instance ID")
	cmd.Flags().StringVarP(&file, "file", "f", "", "write the kubeconfig to this file (mode 0600) instead of standard output")
	return cmd
}

func (a *app) expireCmd() *cobra.Command {
	var instanceID string
	cmd := &cobra.Command{
		Use:     "expire",
		Short:   "Expire a trial or free instance (PUT /expire/service_instance/{id}): its runtime is removed, the instance stays",
		Example: "  kcp expire -i 1234",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if instanceID == "" {
				return usagef("--instance-id is required")
			}
			raw, err := a.client.do(cmd.Context(), "PUT", "/expire/service_instance/"+url.PathEscape(instanceID), nil, nil)
			if err != nil {
				return err
			}
			var answer map[string]any
			if json.Unmarshal(raw, &answer) != nil {
				answer = map[string]any{"response": string(raw)}
			}
			answer["instanceID"] = instanceID
			return a.print(answer, func() table {
				t := fields()
				t.add("instanceID", instanceID)
				for k, v := range answer {
					if k != "instanceID" {
						t.add(k, fmt.Sprint(v))
					}
				}
				return t
			})
		},
	}
	cmd.Flags().StringVarP(&instanceID, "instance-id", "i", "", "instance ID")
	return cmd
}
