package engine

import (
	"sync"

	"github.com/sirupsen/logrus"
)

// stepLogger is the logger a step run gets: the run's logger with the step's name, made only
// when the step logs. Most runs log nothing, and WithField copies the run's fields into a new
// map each time (a tenth of the engine's allocations per transition).
type stepLogger struct {
	base logrus.FieldLogger
	step string
	once sync.Once
	made logrus.FieldLogger
}

func newStepLogger(base logrus.FieldLogger, step string) *stepLogger {
	return &stepLogger{base: base, step: step}
}

func (l *stepLogger) get() logrus.FieldLogger {
	l.once.Do(func() { l.made = l.base.WithField("step", l.step) })
	return l.made
}

func (l *stepLogger) WithField(key string, value any) *logrus.Entry {
	return l.get().WithField(key, value)
}
func (l *stepLogger) WithFields(fields logrus.Fields) *logrus.Entry {
	return l.get().WithFields(fields)
}
func (l *stepLogger) WithError(err error) *logrus.Entry { return l.get().WithError(err) }

func (l *stepLogger) Debugf(format string, args ...any)   { l.get().Debugf(format, args...) }
func (l *stepLogger) Infof(format string, args ...any)    { l.get().Infof(format, args...) }
func (l *stepLogger) Printf(format string, args ...any)   { l.get().Printf(format, args...) }
func (l *stepLogger) Warnf(format string, args ...any)    { l.get().Warnf(format, args...) }
func (l *stepLogger) Warningf(format string, args ...any) { l.get().Warningf(format, args...) }
func (l *stepLogger) Errorf(format string, args ...any)   { l.get().Errorf(format, args...) }
func (l *stepLogger) Fatalf(format string, args ...any)   { l.get().Fatalf(format, args...) }
func (l *stepLogger) Panicf(format string, args ...any)   { l.get().Panicf(format, args...) }

func (l *stepLogger) Debug(args ...any)   { l.get().Debug(args...) }
func (l *stepLogger) Info(args ...any)    { l.get().Info(args...) }
func (l *stepLogger) Print(args ...any)   { l.get().Print(args...) }
func (l *stepLogger) Warn(args ...any)    { l.get().Warn(args...) }
func (l *stepLogger) Warning(args ...any) { l.get().Warning(args...) }
func (l *stepLogger) Error(args ...any)   { l.get().Error(args...) }
func (l *stepLogger) Fatal(args ...any)   { l.get().Fatal(args...) }
func (l *stepLogger) Panic(args ...any)   { l.get().Panic(args...) }

func (l *stepLogger) Debugln(args ...any)   { l.get().Debugln(args...) }
func (l *stepLogger) Infoln(args ...any)    { l.get().Infoln(args...) }
func (l *stepLogger) Println(args ...any)   { l.get().Println(args...) }
func (l *stepLogger) Warnln(args ...any)    { l.get().Warnln(args...) }
func (l *stepLogger) Warningln(args ...any) { l.get().Warningln(args...) }
func (l *stepLogger) Errorln(args ...any)   { l.get().Errorln(args...) }
func (l *stepLogger) Fatalln(args ...any)   { l.get().Fatalln(args...) }
func (l *stepLogger) Panicln(args ...any)   { l.get().Panicln(args...) }

var _ logrus.FieldLogger = (*stepLogger)(nil)
