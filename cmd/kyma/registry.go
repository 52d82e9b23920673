package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/module"
	"github.com/spf13/cobra"
)

func (a *app) pushModuleCmd() *cobra.Command {
	var src source
	var overwrite bool
	c := &cobra.Command{
		Use:     "module [NAME:VERSION]",
		Aliases: []string{"mod"},
		Short:   "Push a module from a local archive to a registry",
		Long: `Pushes a module from a local archive (--path) to --registry. The registry becomes the module's
effective repository context (appended when another one was effective, as an OCM transfer does).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			r, err := src.open(a)
			if err != nil {
				return err
			}
			if r == nil || src.path == "" {
				return errors.New("push needs --path and --registry")
			}
			name, version, err := src.nameVersion(args)
			if err != nil {
				return err
			}
			art, err := module.LoadArchive(ctx, src.path, name, version)
			if err != nil {
				return err
			}
			start := time.Now()
			res, err := r.Push(ctx, art, overwrite)
			if err != nil {
				return err
			}
			reportPush(a, res, start)
			return nil
		},
	}
	src.add(c)
	src.addNameVersion(c)
	addOverwrite(c, &overwrite)
	return c
}

// addOverwrite adds --module-archive-version-overwrite (the real CLI's name) and --overwrite.
func addOverwrite(c *cobra.Command, overwrite *bool) {
	c.Flags().BoolVar(overwrite, "module-archive-version-overwrite", false, "Replace a version that exists with other content")
	c.Flags().BoolVar(overwrite, "overwrite", false, "Alias of --module-archive-version-overwrite")
}

func (a *app) pullModuleCmd() *cobra.Command {
	var src source
	c := &cobra.Command{
		Use:     "module NAME:VERSION",
		Aliases: []string{"mod"},
		Short:   "Pull a module from a registry into a local archive",
		Long: `Copies a module, exactly as stored and verified by digest, into the local archive --path (an OCI
image layout, created if missing; other modules in it stay). A failed pull leaves no partial module.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			r, err := src.open(a)
			if err != nil {
				return err
			}
			name, version, err := src.nameVersion(args)
			if err != nil {
				return err
			}
			if r == nil || src.path == "" || name == "" || version == "" {
				return errors.New("pull needs NAME:VERSION (or --name and --version), --registry and --path")
			}
			start := time.Now()
			if _, err := r.Pull(ctx, name, version, src.path); err != nil {
				return err
			}
			a.printf("pulled %s into %s in %s\n", r.Ref(name, version), src.path, since(start))
			return nil
		},
	}
	src.add(c)
	src.addNameVersion(c)
	c.Flags().Lookup("path").Usage = "Local archive (OCI layout directory) to pull into"
	return c
}

func (a *app) signModuleCmd() *cobra.Command {
	var src source
	var key, name string
	c := &cobra.Command{
		Use:     "module [NAME:VERSION]",
		Aliases: []string{"mod"},
		Short:   "Sign a module (OCM: RSASSA-PKCS1-v1_5 over SHA-512 of the jsonNormalisation/v1 descriptor)",
		Long:    "Signs a module in a local archive (--path) or in a registry (NAME:VERSION or --name and --version, with --registry), in place.",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			k, err := module.LoadPrivateKey(key)
			if err != nil {
				return err
			}
			art, r, err := src.load(ctx, a, args)
			if err != nil {
				return err
			}
			if err := art.Sign(name, k); err != nil {
				return err
			}
			comp := art.Descriptor.Component
			if src.path != "" {
				p, err := module.SaveArchive(ctx, src.path, art)
				if err != nil {
					return err
				}
				a.printf("signed %s:%s in %s, digest %s\n", comp.Name, comp.Version, src.path, p.Manifest.Digest)
				return nil
			}
			// Only the signature differs from what is there: replacing it is intended.
			res, err := r.Push(ctx, art, true)
			if err != nil {
				return err
			}
			a.printf("signed %s, digest %s\n", res.Ref, res.Digest)
			return nil
		},
	}
	src.add(c)
	src.addNameVersion(c)
	c.Flags().StringVar(&key, "key", "", "RSA private key (PEM)")
	c.Flags().StringVar(&name, "signature-name", module.DefaultSignatureName, "Name of the signature")
	_ = c.MarkFlagRequired("key")
	return c
}

func (a *app) verifyModuleCmd() *cobra.Command {
	var src source
	var key, name string
	c := &cobra.Command{
		Use:     "module [NAME:VERSION]",
		Aliases: []string{"mod"},
		Short:   "Verify a module's signature and the content of every layer",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			k, err := module.LoadPublicKey(key)
			if err != nil {
				return err
			}
			art, _, err := src.load(ctx, a, args)
			if err != nil {
				return err
			}
			if err := art.Verify(name, k); err != nil {
				return err
			}
			comp := art.Descriptor.Component
			a.printf("verified %s:%s with key %s\n", comp.Name, comp.Version, module.KeyFingerprint(k))
			return nil
		},
	}
	src.add(c)
	src.addNameVersion(c)
	c.Flags().StringVar(&key, "key", "", "RSA public key (PEM; a private key works too)")
	c.Flags().StringVar(&name, "signature-name", "", "Signature to check (default: the first)")
	_ = c.MarkFlagRequired("key")
	return c
}

func (a *app) templateModuleCmd() *cobra.Command {
	var src source
	var channel, namespace, output string
	var channelNamed bool
	c := &cobra.Command{
		Use:   "module [NAME:VERSION]",
		Short: "Write the ModuleReleaseMeta and ModuleTemplate (operator.kyma-project.io/v1beta2) of a published module",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			art, r, err := src.load(ctx, a, args)
			if err != nil {
				return err
			}
			o := module.TemplateOptions{Channel: channel, Namespace: namespace, ChannelNamed: channelNamed}
			if r != nil {
				o.Registry, o.NameMapping = r.BaseURL(), r.NameMapping()
			}
			return a.writeTemplate(art, o, output)
		},
	}
	src.add(c)
	c.Flags().StringVar(&channel, "channel", "", "Channel (default: the module's)")
	c.Flags().StringVarP(&namespace, "namespace", "n", "", "Namespace of the template (default: the module's)")
	c.Flags().StringVarP(&output, "output", "o", "template.yaml", "File to write (- for stdout)")
	c.Flags().BoolVar(&channelNamed, "channel-template", false, "Write only a <module>-<channel> template with spec.channel, for lifecycle-managers older than ModuleReleaseMeta")
	return c
}

// writeTemplate writes a module's ModuleTemplate to file ("" or "-": stdout).
func (a *app) writeTemplate(art *module.Artifact, o module.TemplateOptions, file string) error {
	data, err := module.TemplateYAML(art, o)
	if err != nil {
		return err
	}
	if file == "" || file == "-" {
		_, err = a.out.Write(data)
		return err
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return fmt.Errorf("write template: %w", err)
	}
	a.printf("template written to %s\n", file)
	return nil
}
