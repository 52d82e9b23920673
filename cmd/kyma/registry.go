package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kyma-project/kyma-environment-broker/internal/module"
	"github.com/spf13/cobra"
)

func (a *app) pushModuleCmd() *cobra.Command {
	var reg registryFlags
	var path, version string
	var overwrite bool
	c := &cobra.Command{
		Use:   "module",
		Short: "Push a module from a local archive to a registry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			r, err := reg.open(a)
			if err != nil {
				return err
			}
			if r == nil || path == "" {
				return errors.New("push needs --path and --registry")
			}
			art, err := module.LoadArchive(ctx, path, version)
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
	reg.add(c)
	c.Flags().StringVar(&path, "path", "", "Local archive (OCI layout directory)")
	c.Flags().StringVar(&version, "version", "", "Version in the archive (needed when it holds several)")
	c.Flags().BoolVar(&overwrite, "overwrite", false, "Replace a version that exists with other content")
	return c
}

func (a *app) pullModuleCmd() *cobra.Command {
	var reg registryFlags
	var path string
	c := &cobra.Command{
		Use:   "module NAME:VERSION",
		Short: "Pull a module from a registry into a local archive",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := a.ctx(cmd)
			defer cancel()
			r, err := reg.open(a)
			if err != nil {
				return err
			}
			name, version, ok := strings.Cut(args[0], ":")
			if r == nil || path == "" || !ok {
				return errors.New("pull needs NAME:VERSION, --registry and --path")
			}
			start := time.Now()
			if _, err := r.Pull(ctx, name, version, path); err != nil {
				return err
			}
			a.printf("pulled %s into %s in %s\n", r.Ref(name, version), path, since(start))
			return nil
		},
	}
	reg.add(c)
	c.Flags().StringVar(&path, "path", "", "Local archive (OCI layout directory) to pull into")
	return c
}

func (a *app) signModuleCmd() *cobra.Command {
	var src source
	var key, name string
	c := &cobra.Command{
		Use:   "module [NAME:VERSION]",
		Short: "Sign a module (RSASSA-PKCS1-v1_5 over SHA-512 of the normalised descriptor)",
		Long:  "Signs a module in a local archive (--path) or in a registry (NAME:VERSION --registry), in place.",
		Args:  cobra.MaximumNArgs(1),
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
	c.Flags().StringVar(&key, "key", "", "RSA private key (PEM)")
	c.Flags().StringVar(&name, "signature-name", module.DefaultSignatureName, "Name of the signature")
	_ = c.MarkFlagRequired("key")
	return c
}

func (a *app) verifyModuleCmd() *cobra.Command {
	var src source
	var key, name string
	c := &cobra.Command{
		Use:   "module [NAME:VERSION]",
		Short: "Verify a module's signature and the content of every layer",
		Args:  cobra.MaximumNArgs(1),
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
