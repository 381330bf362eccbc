package simulator

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

func ptrTo[T any](v T) *T { return &v }

func TestPodDependencies(t *testing.T) {
	tests := []struct {
		name string
		spec corev1.PodSpec
		want []dependency
	}{
		{name: "nothing referenced"},
		{
			name: "secret and configmap volumes, optional ones skipped",
			spec: corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}},
				{Name: "opt", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "maybe", Optional: ptrTo(true)}}},
				{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Optional: ptrTo(false),
				}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			}},
			want: []dependency{
				{kind: kindSecret, name: "db", volume: "creds"},
				{kind: kindConfigMap, name: "settings", volume: "cfg"},
			},
		},
		{
			name: "volume items need their keys",
			spec: corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: "db", Items: []corev1.KeyToPath{{Key: "password", Path: "pw"}},
				}}},
			}},
			want: []dependency{
				{kind: kindSecret, name: "db", volume: "creds"},
				{kind: kindSecret, name: "db", key: "password", volume: "creds"},
			},
		},
		{
			name: "projected sources",
			spec: corev1.PodSpec{Volumes: []corev1.Volume{
				{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "tls"}}},
					{ConfigMap: &corev1.ConfigMapProjection{
						LocalObjectReference: corev1.LocalObjectReference{Name: "ca"},
						Items:                []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
					}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "opt"}, Optional: ptrTo(true)}},
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
				}}}},
			}},
			want: []dependency{
				{kind: kindSecret, name: "tls", volume: "all"},
				{kind: kindConfigMap, name: "ca", volume: "all"},
				{kind: kindConfigMap, name: "ca", key: "ca.crt", volume: "all"},
			},
		},
		{
			name: "env of init and app containers, volumes first",
			spec: corev1.PodSpec{
				Containers: []corev1.Container{{
					Name: "app",
					EnvFrom: []corev1.EnvFromSource{
						{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-env"}}},
						{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "opt-env"}, Optional: ptrTo(true)}},
					},
					Env: []corev1.EnvVar{
						{Name: "PLAIN", Value: "x"},
						{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
							LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password",
						}}},
						{Name: "OPT", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
							LocalObjectReference: corev1.LocalObjectReference{Name: "x"}, Key: "y", Optional: ptrTo(true),
						}}},
						{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					},
				}},
				InitContainers: []corev1.Container{{
					Name: "migrate",
					Env: []corev1.EnvVar{{Name: "LEVEL", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "level",
					}}}},
				}},
				Volumes: []corev1.Volume{
					{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "files"}}}},
				},
			},
			want: []dependency{
				{kind: kindConfigMap, name: "files", volume: "cfg"},
				{kind: kindConfigMap, name: "settings", key: "level"},
				{kind: kindSecret, name: "app-env"},
				{kind: kindSecret, name: "db", key: "password"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := podDependencies(&tt.spec)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("podDependencies() =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// fakeLookup serves objects from "Kind/namespace/name" -> data keys.
func fakeLookup(objects map[string][]string) lookupFunc {
	return func(kind, namespace, name string) (sets.Set[string], bool) {
		keys, ok := objects[fmt.Sprintf("%s/%s/%s", kind, namespace, name)]
		if !ok {
			return nil, false
		}
		return sets.New(keys...), true
	}
}

func TestFirstMissing(t *testing.T) {
	objects := map[string][]string{
		"Secret/ns/db":          {"password"},
		"ConfigMap/ns/settings": {"level"},
		"Secret/other/tls":      {"tls.crt"},
	}
	tests := []struct {
		name        string
		deps        []dependency
		wantReason  string
		wantMessage string
	}{
		{name: "nothing needed"},
		{
			name: "all present",
			deps: []dependency{
				{kind: kindSecret, name: "db", key: "password"},
				{kind: kindConfigMap, name: "settings", volume: "cfg"},
			},
		},
		{
			name:        "missing volume secret",
			deps:        []dependency{{kind: kindSecret, name: "tls", volume: "certs"}},
			wantReason:  ReasonContainerCreating,
			wantMessage: `MountVolume.SetUp failed for volume "certs": secret "tls" not found`,
		},
		{
			name:        "missing volume key",
			deps:        []dependency{{kind: kindConfigMap, name: "settings", key: "other", volume: "cfg"}},
			wantReason:  ReasonContainerCreating,
			wantMessage: `MountVolume.SetUp failed for volume "cfg": couldn't find key other in ConfigMap ns/settings`,
		},
		{
			name:        "missing env configmap",
			deps:        []dependency{{kind: kindConfigMap, name: "env"}},
			wantReason:  ReasonConfigError,
			wantMessage: `configmap "env" not found`,
		},
		{
			name:        "missing env key",
			deps:        []dependency{{kind: kindSecret, name: "db", key: "user"}},
			wantReason:  ReasonConfigError,
			wantMessage: `couldn't find key user in Secret ns/db`,
		},
		{
			name: "first problem wins",
			deps: []dependency{
				{kind: kindSecret, name: "db", volume: "creds"},
				{kind: kindSecret, name: "gone"},
				{kind: kindSecret, name: "also-gone", volume: "x"},
			},
			wantReason:  ReasonConfigError,
			wantMessage: `secret "gone" not found`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, message, missing := firstMissing("ns", tt.deps, fakeLookup(objects))
			if missing != (tt.wantReason != "") {
				t.Fatalf("missing = %v, want %v (reason %q, message %q)", missing, !missing, reason, message)
			}
			if reason != tt.wantReason || message != tt.wantMessage {
				t.Errorf("got (%q, %q), want (%q, %q)", reason, message, tt.wantReason, tt.wantMessage)
			}
		})
	}
}
