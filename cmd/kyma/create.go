package main

import (
	"path/filepath"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/module"
	"github.com/spf13/cobra"
)

func (a *app) createModuleCmd() *cobra.Command {
	var (
		reg                                              registryFlags
		configFile, dir, channel, key, sigName, template string
		archive, image, templateNS                       string
		overwrite                                        bool
	)
	c := &cobra.Command{
		Use:   "module",
		Short: "Create a module (an OCM component version) from a module config file and a directory",
		Long: `Builds the module as an OCM component version: the component descriptor (v2) with the manifest,
default CR, security config and resources as local blobs. The same inputs give the same digest.
With --registry it is pushed to <registry>/component-descriptors/<name>:<version>; with --key it
is signed first; with -o the ModuleTemplate is written; with --module-archive-path it is kept in a
local archive (OCI layout).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			start := time.Now()
			cfg, err := module.LoadConfig(configFile)
			if err != nil {
				return err
			}
			if channel != "" {
				cfg.Channel = channel
			}
			if dir == "" {
				dir = filepath.Dir(configFile)
			}
			r, err := reg.open(a)
			if err != nil {
				return err
			}
			o := module.CreateOptions{Config: cfg, Dir: dir, NameMapping: reg.nameMapping, Image: image}
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
			if template != "" {
				return a.writeTemplate(art, module.TemplateOptions{Namespace: templateNS}, template)
			}
			return nil
		},
	}
	reg.add(c)
	f := c.Flags()
	f.StringVar(&configFile, "module-config-file", "", "Module config file (name, version, channel, manifest, defaultCR, ...)")
	f.StringVar(&dir, "path", "", "Module directory the config's paths are relative to (default: the config file's directory)")
	f.StringVar(&channel, "channel", "", "Channel (overrides the config's)")
	f.StringVar(&key, "key", "", "RSA private key (PEM) to sign the module with")
	f.StringVar(&sigName, "signature-name", module.DefaultSignatureName, "Name of the signature")
	f.StringVarP(&template, "output", "o", "", "Write the ModuleTemplate to this file")
	f.StringVar(&templateNS, "template-namespace", "", "Namespace of the ModuleTemplate (overrides the config's)")
	f.StringVar(&archive, "module-archive-path", "", "Also keep the module in this local archive (OCI layout)")
	f.StringVar(&image, "image", "", "Pre-existing OCI image to reference as the module's image (overrides the config's)")
	f.BoolVar(&overwrite, "overwrite", false, "Replace a version that exists with other content")
	_ = c.MarkFlagRequired("module-config-file")
	return c
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
