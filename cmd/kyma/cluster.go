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
	c.Flags().StringVarP(&f.name, "kyma-name", "k", module.DefaultKymaName, "Name of the Kyma resource")
}

// timeoutFlag gives a cluster command the real CLI's -t for --timeout (the global flag, bound to
// the same value), unless the command reads a registry: there -t is the real CLI's --token.
func (a *app) timeoutFlag(c *cobra.Command) {
	short := "t"
	if c.Flags().ShorthandLookup("t") != nil {
		short = ""
	}
	c.Flags().DurationVarP(&a.timeout, "timeout", short, defaultTimeout, "Bound on the whole command (cluster calls and --wait)")
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
	var kubeconfig, namespace, kyma, output string
	var allNamespaces, noHeaders bool
	c := &cobra.Command{
		Use:     "module",
		Aliases: moduleAliases,
		Short:   "List the modules offered to a cluster (release metas and templates), enabled in a Kyma resource (-k), or in a registry (--registry)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			var rows [][]string
			var result any
			var header []string
			switch {
			case reg.registry != "":
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
			default:
				cfg, err := module.RESTConfig(kubeconfig)
				if err != nil {
					return err
				}
				cl, err := module.NewCluster(cfg, a.log())
				if err != nil {
					return err
				}
				var mods []module.ClusterModule
				if kyma != "" {
					if mods, err = cl.ListKymaModules(ctx, namespace, kyma); err != nil {
						return err
					}
					header = []string{"MODULE", "CHANNEL", "VERSION", "STATE", "TEMPLATE", "MESSAGE"}
					for _, m := range mods {
						rows = append(rows, []string{m.Module, m.Channel, dash(m.Version), dash(m.State), m.Template, m.Message})
					}
				} else {
					ns := namespace
					if allNamespaces {
						ns = ""
					}
					if mods, err = cl.ListTemplates(ctx, ns); err != nil {
						return err
					}
					header = []string{"MODULE", "CHANNEL", "VERSION", "TEMPLATE"}
					for _, m := range mods {
						rows = append(rows, []string{m.Module, dash(m.Channel), m.Version, m.Template})
					}
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
				if !noHeaders {
					fmt.Fprintln(tw, strings.Join(header, "\t"))
				}
				for _, r := range rows {
					fmt.Fprintln(tw, strings.TrimRight(strings.Join(r, "\t"), "\t"))
				}
				return tw.Flush()
			default:
				return fmt.Errorf("-o %q: want table, json or yaml", output)
			}
			return nil
		},
	}
	reg.add(c)
	a.timeoutFlag(c)
	c.Flags().StringVar(&kubeconfig, "kubeconfig", "", "Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	c.Flags().StringVarP(&namespace, "namespace", "n", module.DefaultKymaNamespace, "Namespace of the templates, or of the Kyma resource with -k")
	c.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "Templates of every namespace (ignores --namespace)")
	c.Flags().StringVarP(&kyma, "kyma-name", "k", "", "List the modules enabled in this Kyma resource, with their state")
	c.Flags().BoolVar(&noHeaders, "no-headers", false, "Table without its header line")
	c.Flags().StringVarP(&output, "output", "o", "table", "table, json or yaml")
	return c
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (a *app) enableModuleCmd() *cobra.Command {
	var k kymaFlags
	var channel, policy string
	var waitReady, force bool
	c := &cobra.Command{
		Use:     "module NAME",
		Aliases: moduleAliases,
		Short:   "Enable a module: add it to the Kyma resource's spec.modules",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			spec := module.ModuleSpec{Name: args[0], Channel: channel, CustomResourcePolicy: policy}
			cl, err := k.editModules(a, args[0], "enabled", "was already enabled", func(cl *module.Cluster) (bool, error) {
				if err := spec.Validate(); err != nil {
					return false, err
				}
				if !force {
					if err := cl.CheckTemplate(ctx, k.namespace, k.name, spec); err != nil {
						return false, fmt.Errorf("%w (--force-conflicts enables it anyway)", err)
					}
				}
				return cl.Enable(ctx, k.namespace, k.name, spec)
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
	a.timeoutFlag(c)
	c.Flags().StringVarP(&channel, "channel", "c", "", "Channel (default: the Kyma's)")
	c.Flags().StringVarP(&policy, "policy", "p", "", "Custom resource policy: CreateAndDelete or Ignore")
	c.Flags().BoolVarP(&waitReady, "wait", "w", false, "Wait (bounded by --timeout) until the module reports Ready")
	c.Flags().BoolVarP(&force, "force-conflicts", "f", false, "Enable even if no ModuleTemplate offers the module in the channel")
	return c
}

func (a *app) disableModuleCmd() *cobra.Command {
	var k kymaFlags
	var channel string
	var waitGone, force bool
	c := &cobra.Command{
		Use:     "module NAME",
		Aliases: moduleAliases,
		Short:   "Disable a module: remove it from the Kyma resource's spec.modules",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			cl, err := k.editModules(a, args[0], "disabled", "was not enabled", func(cl *module.Cluster) (bool, error) {
				changed, err := cl.Disable(ctx, k.namespace, k.name, args[0], channel)
				if err == nil && !changed && !force {
					what := args[0]
					if channel != "" {
						what += " in channel " + channel
					}
					return false, fmt.Errorf("module %s is not enabled in Kyma %s/%s (--force: no error)", what, k.namespace, k.name)
				}
				return changed, err
			})
			if err != nil || !waitGone {
				return err
			}
			start := time.Now()
			err = cl.WaitRemoved(ctx, k.namespace, k.name, args[0], time.Second, func(state string) {
				a.printf("module %s: %s (%s)\n", args[0], state, since(start))
			})
			if err != nil {
				return err
			}
			a.printf("module %s is removed\n", args[0])
			return nil
		},
	}
	k.add(c)
	a.timeoutFlag(c)
	c.Flags().StringVarP(&channel, "channel", "c", "", "Only disable the module if it is enabled in this channel")
	c.Flags().BoolVarP(&waitGone, "wait", "w", false, "Wait (bounded by --timeout) until the module's manager has removed it")
	c.Flags().BoolVarP(&force, "force", "f", false, "Succeed even if the module is not enabled")
	return c
}

func (a *app) deployCmd() *cobra.Command {
	var k kymaFlags
	var templates, extra, modules []string
	var channel string
	var manager managerFlags
	c := &cobra.Command{
		Use:   "deploy",
		Short: "Apply release metas, ModuleTemplates and the Kyma resource to a cluster (server-side apply), and set the module manager up",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			var objs []*unstructured.Unstructured
			for _, file := range append(append([]string(nil), templates...), extra...) {
				data, err := os.ReadFile(file)
				if err != nil {
					return fmt.Errorf("read template: %w", err)
				}
				read, err := module.ReadObjects(data)
				if err != nil {
					return fmt.Errorf("template %s: %w", file, err)
				}
				objs = append(objs, read...)
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
			a.printf("deployed %d object(s) and Kyma %s/%s\n", len(objs), k.namespace, k.name)
			return manager.deploy(ctx, a, k)
		},
	}
	k.add(c)
	a.timeoutFlag(c)
	manager.add(c)
	c.Flags().StringArrayVar(&templates, "template", nil, "File of ModuleTemplates and ModuleReleaseMetas to apply (repeatable)")
	c.Flags().StringArrayVar(&extra, "extra-templates", nil, "Further template files to apply (repeatable)")
	c.Flags().StringArrayVarP(&modules, "module", "m", nil, "Module to enable, NAME[:CHANNEL] (repeatable)")
	c.Flags().StringVarP(&channel, "channel", "c", module.DefaultChannel, "Channel of the Kyma resource")
	return c
}
