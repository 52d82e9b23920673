package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/module"
	"github.com/spf13/cobra"
)

func (a *app) createModuleCmd() *cobra.Command {
	var (
		reg                                                   registryFlags
		configFile, dir, channel, key, sigName, template      string
		archive, image, templateNS, credSelector, descVersion string
		name, version, defaultCR, security                    string
		resources                                             []string
		overwrite                                             bool
	)
	c := &cobra.Command{
		Use:     "module",
		Aliases: []string{"mod"},
		Short:   "Create a module (an OCM component version) from a module config file and a directory",
		Long: `Builds the module as an OCM component version: the component descriptor (v2) with the manifest,
default CR, security config and resources as local blobs. The same inputs give the same digest.
Everything is validated before anything is written or pushed. With --registry it is pushed to
<registry>/component-descriptors/<name>:<version> and the ModuleTemplate is written to -o
(default template.yaml); with --key it is signed first; with --module-archive-path it is kept in
a local archive (OCI layout).`,
		Example: `  kyma alpha create module --module-config-file module-config.yaml -p . --registry http://localhost:5001/unsigned --insecure
  kyma alpha create module --module-config-file module-config.yaml -r charts:helm-chart@charts --registry ghcr.io/acme --name-mapping sha256-digest`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			start := time.Now()
			if descVersion != module.SchemaVersionV2 {
				return fmt.Errorf("--descriptor-version %q: this CLI writes component descriptors %s only", descVersion, module.SchemaVersionV2)
			}
			max, err := reg.maxResourceSize()
			if err != nil {
				return err
			}
			cfg, err := module.LoadConfig(configFile)
			if err != nil {
				return err
			}
			overrides := map[string]*string{"name": &cfg.Name, "version": &cfg.Version, "channel": &cfg.Channel,
				"default-cr": &cfg.DefaultCR, "sec-scanners-config": &cfg.Security, "namespace": &cfg.Namespace, "template-namespace": &cfg.Namespace}
			values := map[string]string{"name": name, "version": version, "channel": channel, "default-cr": defaultCR,
				"sec-scanners-config": security, "namespace": templateNS, "template-namespace": templateNS}
			for flag, dst := range overrides {
				if cmd.Flags().Changed(flag) {
					*dst = values[flag]
				}
			}
			for _, r := range resources {
				rc, err := parseResourceFlag(r)
				if err != nil {
					return err
				}
				cfg.Resources = append(cfg.Resources, rc)
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			if dir == "" {
				dir = filepath.Dir(configFile)
			}
			r, err := reg.open(a)
			if err != nil {
				return err
			}
			writeTemplate := r != nil || cmd.Flags().Changed("output")
			if writeTemplate {
				// What lifecycle-manager would reject is refused before anything is written.
				if err := module.ValidateModuleTemplate(module.ModuleName(cfg.Name), cfg.Version, cfg.Channel); err != nil {
					return err
				}
			}
			o := module.CreateOptions{Config: cfg, Dir: dir, NameMapping: reg.nameMapping, Image: image,
				RegistryCredSelector: credSelector, MaxResourceSize: max}
			if r != nil {
				o.Registry, o.ResolveImage = r.BaseURL(), r.ResolveImage
			}
			art, err := module.Create(ctx, o)
			if err != nil {
				return err
			}
			if key != "" {
				k, err := module.LoadPrivateKey(key)
				if err != nil {
					return err
				}
				if err := art.Sign(sigName, k); err != nil {
					return err
				}
			}
			p, err := art.Pack()
			if err != nil {
				return err
			}
			a.printf("created %s:%s digest %s (%d bytes) in %s\n", cfg.Name, cfg.Version, p.Manifest.Digest, p.Size(), since(start))
			if archive != "" {
				if _, err := module.SaveArchive(ctx, archive, art); err != nil {
					return err
				}
				a.printf("archived in %s\n", archive)
			}
			if r != nil {
				pushStart := time.Now()
				res, err := r.Push(ctx, art, overwrite)
				if err != nil {
					return err
				}
				reportPush(a, res, pushStart)
			}
			if writeTemplate {
				return a.writeTemplate(art, module.TemplateOptions{Namespace: cfg.Namespace}, template)
			}
			return nil
		},
	}
	reg.add(c)
	f := c.Flags()
	f.StringVar(&configFile, "module-config-file", "", "Module config file (name, version, channel, manifest, defaultCR, ...)")
	f.StringVarP(&dir, "path", "p", "", "Module directory the config's paths are relative to (default: the config file's directory)")
	f.StringVar(&channel, "channel", "", "Channel (overrides the config's)")
	f.StringVarP(&name, "name", "n", "", "Component name (overrides the config's)")
	f.StringVar(&version, "version", "", "Version (overrides the config's)")
	f.StringVar(&defaultCR, "default-cr", "", "Default CR file (overrides the config's defaultCR)")
	f.StringVar(&security, "sec-scanners-config", "", "Security scanners config file (overrides the config's security)")
	f.StringArrayVarP(&resources, "resource", "r", nil, "Extra resource NAME:TYPE@PATH (PATH alone: named after its last element, type helm-chart); repeatable")
	f.StringVar(&key, "key", "", "RSA private key (PEM) to sign the module with")
	f.StringVar(&sigName, "signature-name", module.DefaultSignatureName, "Name of the signature")
	f.StringVarP(&template, "output", "o", "template.yaml", "File for the ModuleTemplate, written when the module is pushed (or -o is given)")
	f.StringVar(&templateNS, "namespace", "", "Namespace of the ModuleTemplate (overrides the config's)")
	f.StringVar(&templateNS, "template-namespace", "", "Alias of --namespace")
	f.StringVar(&archive, "module-archive-path", "", "Also keep the module in this local archive (OCI layout)")
	f.StringVar(&image, "image", "", "Pre-existing OCI image to reference as the module's image (overrides the config's)")
	f.StringVar(&credSelector, "registry-cred-selector", "", "Label selector (k=v,...) of the Secret with the registry's credentials, labelled on every resource")
	f.StringVar(&descVersion, "descriptor-version", module.SchemaVersionV2, "Schema version of the component descriptor (v2 only)")
	addOverwrite(c, &overwrite)
	_ = c.MarkFlagRequired("module-config-file")
	return c
}

// parseResourceFlag reads -r NAME:TYPE@PATH as the real CLI does: PATH alone is named after its
// last element with type helm-chart; NAME@PATH has type helm-chart too.
func parseResourceFlag(v string) (module.ResourceConfig, error) {
	spec, path, ok := strings.Cut(v, "@")
	if !ok {
		path, spec = v, ""
	}
	if path == "" {
		return module.ResourceConfig{}, fmt.Errorf("--resource %q: want NAME:TYPE@PATH", v)
	}
	name, typ, _ := strings.Cut(spec, ":")
	if name == "" {
		name = filepath.Base(filepath.Clean(path))
	}
	if typ == "" {
		typ = module.ResourceTypeHelmChart
	}
	return module.ResourceConfig{Name: name, Type: typ, Path: path}, nil
}

func reportPush(a *app, res *module.PushResult, start time.Time) {
	if res.Unchanged {
		a.printf("%s already exists with the same content (%s): nothing pushed\n", res.Ref, res.Digest)
		return
	}
	a.printf("pushed %s digest %s in %s\n", res.Ref, res.Digest, since(start))
}

func (a *app) createKeyCmd() *cobra.Command {
	var priv, pub string
	var bits int
	var force bool
	c := &cobra.Command{
		Use:   "key",
		Short: "Create an RSA key pair for signing modules",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := module.WriteKeyPair(priv, pub, bits, force); err != nil {
				return err
			}
			a.printf("private key %s, public key %s\n", priv, pub)
			return nil
		},
	}
	c.Flags().StringVar(&priv, "private-key", "private.pem", "Private key file (written 0600)")
	c.Flags().StringVar(&pub, "public-key", "public.pem", "Public key file")
	c.Flags().IntVar(&bits, "bits", 4096, "Key size")
	c.Flags().BoolVar(&force, "force", false, "Replace existing key files")
	return c
}
