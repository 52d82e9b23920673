package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/module"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// kymaFlags name the cluster and the Kyma resource.
type kymaFlags struct {
	kubeconfig, namespace, name string
}

func (f *kymaFlags) add(c *cobra.Command) {
	c.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	c.Flags().StringVarP(&f.namespace, "namespace", "n", module.DefaultKymaNamespace, "Namespace of the Kyma resource")
	c.Flags().StringVar(&f.name, "kyma-name", module.DefaultKymaName, "Name of the Kyma resource")
}

func (f *kymaFlags) cluster(a *app) (*module.Cluster, error) {
	cfg, err := module.RESTConfig(f.kubeconfig)
	if err != nil {
		return nil, err
	}
	return module.NewCluster(cfg, a.log())
}

// editModules runs an edit of the Kyma resource's spec.modules and says what it did: did when it
// changed something, else already.
func (f *kymaFlags) editModules(a *app, name, did, already string, edit func(*module.Cluster) (bool, error)) (*module.Cluster, error) {
	cl, err := f.cluster(a)
	if err != nil {
		return nil, err
	}
	changed, err := edit(cl)
	if err != nil {
		return nil, err
	}
	if !changed {
		did = already
	}
	a.printf("module %s %s in Kyma %s/%s\n", name, did, f.namespace, f.name)
	return cl, nil
}

func (a *app) listModuleCmd() *cobra.Command {
	var reg registryFlags
	var kubeconfig, namespace, output string
	c := &cobra.Command{
		Use:   "module",
		Short: "List the modules available to a cluster (its ModuleTemplates) or, with --registry, in a registry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			var rows [][]string
			var result any
			header := []string{"MODULE", "CHANNEL", "VERSION", "TEMPLATE"}
			if reg.registry != "" {
				r, err := reg.open(a)
				if err != nil {
					return err
				}
				mods, err := r.List(ctx)
				if err != nil {
					return err
				}
				header = []string{"MODULE", "CHANNEL", "VERSION", "REFERENCE"}
				for _, m := range mods {
					rows = append(rows, []string{m.Module, m.Channel, m.Version, m.Ref})
				}
				result = mods
			} else {
				cfg, err := module.RESTConfig(kubeconfig)
				if err != nil {
					return err
				}
				cl, err := module.NewCluster(cfg, a.log())
				if err != nil {
					return err
				}
				mods, err := cl.ListTemplates(ctx, namespace)
				if err != nil {
					return err
				}
				for _, m := range mods {
					rows = append(rows, []string{m.Module, m.Channel, m.Version, m.Template})
				}
				result = mods
			}
			switch output {
			case "json":
				data, err := json.MarshalIndent(result, "", "  ")
				if err != nil {
					return err
				}
				a.printf("%s\n", data)
			case "yaml":
				data, err := yaml.Marshal(result)
				if err != nil {
					return err
				}
				a.printf("%s", data)
			case "", "table":
				tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, strings.Join(header, "\t"))
				for _, r := range rows {
					fmt.Fprintln(tw, strings.Join(r, "\t"))
				}
				return tw.Flush()
			default:
				return fmt.Errorf("-o %q: want table, json or yaml", output)
			}
			return nil
		},
	}
	reg.add(c)
	c.Flags().StringVar(&kubeconfig, "kubeconfig", "", "Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	c.Flags().StringVarP(&namespace, "namespace", "n", "", "Namespace of the ModuleTemplates (default: all)")
	c.Flags().StringVarP(&output, "output", "o", "table", "table, json or yaml")
	return c
}

func (a *app) enableModuleCmd() *cobra.Command {
	var k kymaFlags
	var channel, policy string
	var waitReady bool
	c := &cobra.Command{
		Use:   "module NAME",
		Short: "Enable a module: add it to the Kyma resource's spec.modules",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			cl, err := k.editModules(a, args[0], "enabled", "was already enabled", func(cl *module.Cluster) (bool, error) {
				return cl.Enable(ctx, k.namespace, k.name, module.ModuleSpec{Name: args[0], Channel: channel, CustomResourcePolicy: policy})
			})
			if err != nil || !waitReady {
				return err
			}
			start := time.Now()
			err = cl.WaitReady(ctx, k.namespace, k.name, args[0], time.Second, func(state string) {
				if state == "" {
					state = "not reported yet"
				}
				a.printf("module %s: %s (%s)\n", args[0], state, since(start))
			})
			if err != nil {
				return err
			}
			a.printf("module %s is Ready\n", args[0])
			return nil
		},
	}
	k.add(c)
	c.Flags().StringVarP(&channel, "channel", "c", "", "Channel (default: the Kyma's)")
	c.Flags().StringVarP(&policy, "policy", "p", "", "Custom resource policy: CreateAndDelete or Ignore")
	c.Flags().BoolVarP(&waitReady, "wait", "w", false, "Wait (bounded by --timeout) until the module reports Ready")
	return c
}

func (a *app) disableModuleCmd() *cobra.Command {
	var k kymaFlags
	c := &cobra.Command{
		Use:   "module NAME",
		Short: "Disable a module: remove it from the Kyma resource's spec.modules",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			_, err := k.editModules(a, args[0], "disabled", "was not enabled", func(cl *module.Cluster) (bool, error) {
				return cl.Disable(ctx, k.namespace, k.name, args[0])
			})
			return err
		},
	}
	k.add(c)
	return c
}

func (a *app) deployCmd() *cobra.Command {
	var k kymaFlags
	var templates, modules []string
	var channel string
	c := &cobra.Command{
		Use:   "deploy",
		Short: "Apply ModuleTemplates and the Kyma resource to a cluster (server-side apply)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			var objs []*unstructured.Unstructured
			for _, file := range templates {
				data, err := os.ReadFile(file)
				if err != nil {
					return fmt.Errorf("read template: %w", err)
				}
				obj := &unstructured.Unstructured{}
				if err := yaml.Unmarshal(data, &obj.Object); err != nil {
					return fmt.Errorf("template %s: %w", file, err)
				}
				objs = append(objs, obj)
			}
			spec := module.KymaSpec{Namespace: k.namespace, Name: k.name, Channel: channel}
			for _, m := range modules {
				name, ch, _ := strings.Cut(m, ":")
				if name == "" {
					return errors.New("--module: want NAME[:CHANNEL]")
				}
				spec.Modules = append(spec.Modules, module.ModuleSpec{Name: name, Channel: ch})
			}
			cl, err := k.cluster(a)
			if err != nil {
				return err
			}
			if err := cl.Deploy(ctx, objs, spec); err != nil {
				return err
			}
			a.printf("deployed %d ModuleTemplate(s) and Kyma %s/%s\n", len(objs), k.namespace, k.name)
			return nil
		},
	}
	k.add(c)
	c.Flags().StringArrayVarP(&templates, "template", "t", nil, "ModuleTemplate file to apply (repeatable)")
	c.Flags().StringArrayVar(&modules, "module", nil, "Module to enable, NAME[:CHANNEL] (repeatable)")
	c.Flags().StringVar(&channel, "channel", module.DefaultChannel, "Channel of the Kyma resource")
	return c
}
