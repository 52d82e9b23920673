package standins

import (
	"strings"

	"github.com/kyma-project/kyma-environment-broker/internal/externals"
)

// PointAt replaces every system's URL and credentials in c with the stand-ins' at base
// (http://host:port), which accept creds.
func PointAt(c *externals.Config, base string, creds Credentials) {
	base = strings.TrimRight(base, "/")
	c.AVS.URL, c.AVS.OAuthURL = base+"/avs", base+"/avs/oauth/token"
	c.AVS.ClientID, c.AVS.ClientSecret, c.AVS.ParentID = creds.AVSClientID, creds.AVSClientSecret, AVSParentID
	c.AVS.OAuthUsername, c.AVS.OAuthPassword = creds.AVSUser, creds.AVSPassword
	c.EDP.URL, c.EDP.OAuthURL = base+"/edp", base+"/edp/oauth/token"
	c.EDP.ClientID, c.EDP.ClientSecret, c.EDP.Namespace = creds.EDPClientID, creds.EDPClientSecret, EDPNamespace
	c.IAS.URL, c.IAS.UserID, c.IAS.Password = base+"/ias", creds.IASUser, creds.IASPassword
	c.ServiceManager.URL, c.ServiceManager.TokenURL = base+"/servicemanager", base+"/servicemanager"
	c.ServiceManager.ClientID, c.ServiceManager.ClientSecret = creds.SMClientID, creds.SMClientSecret
	c.Azure.ARMURL, c.Azure.TokenURL = base+"/azure", base+"/azure/oauth2/v2.0/token"
	c.Azure.ClientID, c.Azure.ClientSecret, c.Azure.SubscriptionID = creds.AzureClientID, creds.AzureClientSecret, AzureSubscription
	c.Reconciler.URL = base + "/reconciler"
	c.Director.URL, c.Director.OAuthTokenURL = base+"/director/graphql", base+"/director/oauth/token"
	c.Director.OAuthClientID, c.Director.OAuthClientSecret = creds.DirectorClientID, creds.DirectorClientSecret
}
