package client

import (
	"context"
	"net/http"

	"github.com/legate-dev/legate/internal/protocol"
)

// UpdateRole changes a custom role in place (nil fields are kept;
// Permissions is the whole new list) and returns it as it now is.
func (c *Client) UpdateRole(ctx context.Context, name string, req protocol.UpdateRoleRequest) (protocol.Role, error) {
	const op = "update role"
	if err := requireID(op, "role name", name); err != nil {
		return protocol.Role{}, err
	}
	var out protocol.Role
	err := c.do(ctx, &call{op: op, method: http.MethodPatch, path: protocol.PathRoles + "/" + seg(name), in: req, out: &out})
	return out, err
}
